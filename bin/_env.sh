# Sourced by bin/ scripts: creates (once) and activates the project's venvs.
#   .venv/tf2: Python 3.11+ with the newest TensorFlow 2.x (tensorflow-cpu)
#   .venv/tf1: Python 3.7 (pyenv 3.7.16, or $TF1PRUNE_PY37) with TensorFlow 1.15.5
#   .venv/tf2keras2: like tf2, plus tf_keras (Keras 2) of the same version as
#     TensorFlow, for the Keras tests under TF_USE_LEGACY_KERAS=1
#   .venv/deploy: like tf2, plus the converters of bin/check_deploy (pyproject.toml's
#     `deploy` extra: tf2onnx, onnxruntime, openvino)
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

_py37() {
  if [ -n "${TF1PRUNE_PY37:-}" ]; then echo "$TF1PRUNE_PY37"; return; fi
  if command -v pyenv >/dev/null 2>&1 && [ -x "$(pyenv root)/versions/3.7.16/bin/python" ]; then
    echo "$(pyenv root)/versions/3.7.16/bin/python"; return
  fi
  command -v python3.7 || true
}

# ensure_venv tf1|tf2|tf2keras2|deploy: creates the venv on first use, prints its python.
ensure_venv() {
  local stack=$1 dir="$VENVS/$1" py
  if [ ! -x "$dir/bin/python" ] || [ ! -f "$dir/.ready" ]; then
    rm -rf "$dir"
    if [ "$stack" = tf1 ]; then
      py=$(_py37)
      [ -n "$py" ] || { _log "TF 1.15 needs Python 3.7: install it (pyenv install 3.7.16) or set TF1PRUNE_PY37"; return 1; }
      _log "creating $dir (Python 3.7, TensorFlow 1.15.5): a few minutes, once"
      "$py" -m venv "$dir" >&2 || return 1
      _pip "$dir" --upgrade "pip<24" || return 1
      _pip "$dir" "tensorflow==1.15.5" "numpy<1.19" "protobuf<3.21" \
        tf-slim pytest hypothesis scikit-learn || return 1
    else
      py=$(command -v python3)
      _log "creating $dir ($("$py" --version), TensorFlow 2.x): a few minutes, once"
      "$py" -m venv "$dir" >&2 || return 1
      _pip "$dir" --upgrade pip || return 1
      _pip "$dir" tensorflow-cpu tf-slim pytest hypothesis scikit-learn || return 1
      if [ "$stack" = tf2keras2 ]; then
        # tf_keras must match TensorFlow's major.minor version.
        local tfv
        tfv=$("$dir/bin/python" -c 'import tensorflow as tf; print(".".join(tf.__version__.split(".")[:2]))' 2>/dev/null) || return 1
        _pip "$dir" "tf_keras==$tfv.*" || return 1
      fi
    fi
    _pip "$dir" --no-deps -e "$ROOT" || return 1
    if [ "$stack" = deploy ]; then
      _pip "$dir" -e "$ROOT[deploy]" || return 1
    fi
    touch "$dir/.ready"
  fi
  echo "$dir/bin/python"
}
