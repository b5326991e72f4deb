"""Repros: per distinct finding, a shrunk single-op script and issue text an upstream
maintainer can run without irtrace."""
