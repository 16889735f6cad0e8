#!/usr/bin/env bash
# make test-engines: corral inside the serving engines it supports, installed from PyPI.
#
# One venv per engine, outside the clone (it survives between runs on one machine; about
# 10 GB and 10 minutes each the first time): $CORRAL_ENGINES_DIR, by default
# ~/.cache/corral/engines. A venv is reused when it holds the pinned version. corral is
# built once as a wheel (the same build as `make build`) and installed into each venv
# without dependencies, then tests/engines/ runs there.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
DIR=${CORRAL_ENGINES_DIR:-$HOME/.cache/corral/engines}
ENGINES=${ENGINES:-"vllm==0.33.0 sglang==0.5.23"}
mkdir -p "$DIR"

rm -rf target/engine-wheels
$PY -m maturin build --release -q -o target/engine-wheels -i "$PY"
WHEEL=$(ls target/engine-wheels/corral-*.whl)

status=0
for pin in $ENGINES; do
    name=${pin%%==*}
    version=${pin##*==}
    venv="$DIR/$name-$version"
    if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$name') != '$version')" 2>/dev/null; then
        echo "test-engines: creating $venv (first time: about 10 minutes)"
        rm -rf "$venv"
        $PY -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check "$pin" pytest
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$WHEEL"
    echo "test-engines: $name $version"
    # Run from outside the source tree so that the installed corral (with its entry points)
    # is the one imported, not ./python.
    (cd tests && "$venv/bin/python" -m pytest -p no:cacheprovider -p no:warnings "engines/test_${name}_engine.py") || status=1
done
exit $status
