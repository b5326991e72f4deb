#!/bin/bash
# Whether a change moves any number: each bundled example (on every backend) and, with --corpus, each
# real model of tests/corpus.py in each of its modes (on torch, onnxruntime, onnxref), exported once by
# this checkout, replayed by the code at BASE and by this checkout's, their report.json compared byte for
# byte.   usage: tools/same_reports.sh BASE [--corpus] [OUT]     (OUT default: /tmp/same-reports)
set -u
base=${1:?usage: tools/same_reports.sh BASE [--corpus] [OUT]}; shift
corpus=0; [ "${1:-}" = --corpus ] && { corpus=1; shift; }
out=${1:-/tmp/same-reports}
here=$(cd "$(dirname "$0")/.." && pwd)
py=$here/.venv/bin/python
mkdir -p "$out"
old=$out/base-checkout
[ -d "$old" ] || git -C "$here" worktree add --detach "$old" "$base" > /dev/null
compare() {  # name backends
  for side in base here; do
    root=$([ $side = base ] && echo "$old" || echo "$here")
    [ -f "$out/$1.$side/report.json" ] || (cd "$root" && PYTHONPATH=$root "$py" -m irtrace replay "$out/$1.irt" \
      --backend "$2" --no-cache -o "$out/$1.$side" > "$out/$1.$side.log" 2>&1)
  done
  if cmp -s "$out/$1.base/report.json" "$out/$1.here/report.json"; then
    echo "$1: report.json identical ($(stat -c %s "$out/$1.here/report.json") bytes; $2)"
  else
    echo "$1: report.json DIFFERS ($2; see $out/$1.base.log and $out/$1.here.log)"
  fi
}
export_bundle() {  # name python-code
  [ -d "$out/$1.irt" ] || PYTHONPATH=$here:$here/tests "$py" -c "$2" > "$out/$1.export.log" 2>&1
}
for ex in $(PYTHONPATH=$here "$py" -c "from irtrace.examples import EXAMPLES; print(*EXAMPLES)"); do
  export_bundle "$ex" "import irtrace; from irtrace.examples import EXAMPLES; e = EXAMPLES['$ex']
irtrace.export(e.build(), e.inputs(), '$out/$ex.irt', train=e.train, force=True)"
  compare "$ex" torch,onnxruntime,onnxref,megengine,paddle,oneflow,tensorflow
done
[ $corpus = 1 ] || exit 0
for m in $(PYTHONPATH=$here/tests "$py" -c "import corpus; print(*(f'{k}-{m}' for k, (f, ms) in corpus.CORPUS.items() for m in ms))"); do
  name=${m%-*}; mode=${m##*-}
  export_bundle "$m" "import irtrace, corpus; model, inputs = corpus.build('$name')
irtrace.export(model, inputs, '$out/$m.irt', train='$mode' == 'train', force=True)"
  if [ -d "$out/$m.irt" ]; then compare "$m" torch,onnxruntime,onnxref; else echo "$m: export failed ($out/$m.export.log)"; fi
done
