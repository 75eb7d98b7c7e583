# Sourced by bin/ scripts: creates (once) and activates the project's venvs.
#   .venv/tf2: Python 3.11+ with the newest TensorFlow 2.x (tensorflow-cpu)
#   .venv/tf1: Python 3.7 (pyenv 3.7.16, or $TF1PRUNE_PY37) with TensorFlow 1.15.5
#   .venv/tf215: Python 3.11 with TensorFlow 2.15, the last whose tf.keras is
#     Keras 2 (pyenv 3.11, or python3.11 on PATH)
#   .venv/tf2keras2: like tf2, plus tf_keras (Keras 2) of the same version as
#     TensorFlow, for the Keras tests under TF_USE_LEGACY_KERAS=1
#   .venv/deploy: like tf2, plus the converters of bin/check_deploy (setup.py's
#     `deploy` extra: tf2onnx, onnxruntime, openvino)
#   .venv/tools: Python 3, no TensorFlow: build, twine and ruff (bin/lint, CI)
#   .venv/wheel: like tf2, with tf1prune installed from a wheel, not the
#     checkout (ensure_wheel_venv; CI rebuilds it every run)
#   .venv/tf210, tf212, ...: the older TensorFlow 2.x of `bin/run_tests
#     --matrix` (MATRIX below; docs/versions.md)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENVS=${TF1PRUNE_VENVS:-$ROOT/.venv}
# cifar10_example/ and bench/ are not installed: they run from this checkout.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

_log() { printf '[tf1prune] %s\n' "$*" >&2; }

# _pip DIR ARGS...: pip install quietly, dropping this machine's find-links noise.
_pip() {
  local dir=$1; shift
  "$dir/bin/pip" install -q "$@" 2>&1 | grep -v 'is ignored: it is neither' >&2
  return "${PIPESTATUS[0]}"
}

# _python X.Y: an interpreter of Python X.Y (pyenv's newest X.Y.*, or pythonX.Y).
_python() {
  local found=""
  if command -v pyenv >/dev/null 2>&1; then
    found=$(ls -d "$(pyenv root)/versions/$1".*/bin/python 2>/dev/null | sort -V | tail -1)
  fi
  [ -n "$found" ] || found=$(command -v "python$1" || true)
  echo "$found"
}

_py37() {
  if [ -n "${TF1PRUNE_PY37:-}" ]; then echo "$TF1PRUNE_PY37"; return; fi
  _python 3.7
}

# The older TensorFlow 2.x of `bin/run_tests --matrix`, as venv:Python:TF, each
# TF on a Python it supports, the Pythons spread over 3.8-3.13 (docs/versions.md).
MATRIX="tf210:3.10:2.10 tf212:3.8:2.12 tf213:3.11:2.13 tf214:3.9:2.14
  tf216:3.12:2.16 tf217:3.11:2.17 tf218:3.12:2.18 tf219:3.10:2.19 tf220:3.13:2.20"
TEST_DEPS="tf-slim pytest pytest-xdist hypothesis scikit-learn"

# _new_venv DIR PYTHON DESCRIPTION: an empty venv with a current pip.
_new_venv() {
  [ -n "$2" ] && [ -x "$2" ] || { _log "no Python for $1 ($3): install it with pyenv"; return 1; }
  _log "creating $1 ($("$2" --version 2>&1), $3): a few minutes, once"
  rm -rf "$1"
  "$2" -m venv "$1" >&2 || return 1
  _pip "$1" --upgrade pip || return 1
}

# ensure_venv tf1|tf2|tf215|tf2keras2|deploy|tools|<MATRIX name>: creates the
# venv on first use, prints its python.
ensure_venv() {
  local stack=$1 dir="$VENVS/$1" entry pyv tfv spec numpy
  if [ ! -x "$dir/bin/python" ] || [ ! -f "$dir/.ready" ]; then
    case $stack in
      tf1)
        _new_venv "$dir" "$(_py37)" "TensorFlow 1.15.5" || return 1
        _pip "$dir" --upgrade "pip<24" || return 1
        # shellcheck disable=SC2086
        _pip "$dir" "tensorflow==1.15.5" "numpy<1.19" "protobuf<3.21" $TEST_DEPS || return 1;;
      tf2|tf2keras2|deploy)
        _new_venv "$dir" "$(command -v python3)" "the newest TensorFlow 2.x" || return 1
        # shellcheck disable=SC2086
        _pip "$dir" tensorflow-cpu $TEST_DEPS || return 1
        if [ "$stack" = tf2keras2 ]; then
          # tf_keras must match TensorFlow's major.minor version.
          tfv=$("$dir/bin/python" -c 'import tensorflow as tf; print(".".join(tf.__version__.split(".")[:2]))' 2>/dev/null) || return 1
          _pip "$dir" "tf_keras==$tfv.*" || return 1
        fi;;
      tf215)
        _new_venv "$dir" "$(_python 3.11)" "TensorFlow 2.15, Keras 2" || return 1
        # shellcheck disable=SC2086
        _pip "$dir" "tensorflow-cpu==2.15.*" $TEST_DEPS || return 1;;
      tools)
        _new_venv "$dir" "$(command -v python3)" "build, twine, ruff" || return 1
        _pip "$dir" build twine ruff || return 1
        touch "$dir/.ready"; echo "$dir/bin/python"; return 0;;
      *)
        entry=""
        for spec in $MATRIX; do [ "${spec%%:*}" = "$stack" ] && entry=$spec; done
        [ -n "$entry" ] || { _log "unknown venv '$stack': tf1, tf2, tf215, tf2keras2, deploy, tools or one of: $MATRIX"; return 1; }
        pyv=$(echo "$entry" | cut -d: -f2); tfv=$(echo "$entry" | cut -d: -f3)
        # NumPy 2 needs TensorFlow 2.18 or newer; TensorFlow 2.20 allows any
        # protobuf, but its write_graph(as_text=True) (the Saver's
        # graph.pbtxt) fails with protobuf 7 (float_format is gone).
        numpy=""; [ "${tfv#2.}" -lt 18 ] && numpy="numpy<2"
        [ "${tfv#2.}" = 20 ] && numpy="$numpy protobuf<7"
        _new_venv "$dir" "$(_python "$pyv")" "TensorFlow $tfv" || return 1
        # shellcheck disable=SC2086
        _pip "$dir" "tensorflow-cpu==$tfv.*" $numpy $TEST_DEPS || return 1;;
    esac
    _pip "$dir" --no-deps -e "$ROOT" || return 1
    if [ "$stack" = deploy ]; then
      _pip "$dir" -e "$ROOT[deploy]" || return 1
    fi
    touch "$dir/.ready"
  fi
  echo "$dir/bin/python"
}

# _tf_dists PYTHON: the installed TensorFlow distributions, name==version.
_tf_dists() {
  "$1" -m pip list --format=freeze 2>/dev/null | grep -i -E '^(tensorflow|tf-nightly|tf_nightly|intel-tensorflow)' || true
}

# ensure_wheel_venv WHEEL: a new venv (always rebuilt) with the newest
# tensorflow-cpu, then WHEEL and its `test` extra installed as a user would
# (dependencies resolved, no editable install); fails if installing the wheel
# added or changed a TensorFlow distribution. Prints its python. Without
# PYTHONPATH: pip would take the checkout's tf1prune.egg-info (editable
# installs write it) for an installed tf1prune and skip the wheel.
ensure_wheel_venv() (
  local wheel=$1 dir="$VENVS/wheel" before after
  unset PYTHONPATH
  [ -f "$wheel" ] || { _log "no wheel at '$wheel': build one (python -m build)"; return 1; }
  _new_venv "$dir" "$(command -v python3)" "tensorflow-cpu + $(basename "$wheel")" || return 1
  _pip "$dir" tensorflow-cpu || return 1
  before=$(_tf_dists "$dir/bin/python")
  _pip "$dir" "$wheel[test]" || return 1
  after=$(_tf_dists "$dir/bin/python")
  if [ "$before" != "$after" ]; then
    _log "installing $(basename "$wheel") changed TensorFlow: was [$before], now [$after]"
    return 1
  fi
  touch "$dir/.ready"
  echo "$dir/bin/python"
)
