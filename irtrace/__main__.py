from irtrace.cli import main

raise SystemExit(main())
