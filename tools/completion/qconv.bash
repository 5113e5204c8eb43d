# bash completion for qconv (installed as share/bash-completion/completions/qconv)
_qconv() {
  local cur prev sub i
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  sub=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      convert|verify|inspect|targets|passes|help) sub="${COMP_WORDS[i]}"; break ;;
    esac
  done
  case "$prev" in
    --format) COMPREPLY=($(compgen -W "qop qdq" -- "$cur")); return ;;
    --target) COMPREPLY=($(compgen -W "onnxruntime tensorrt openvino iree tvm aidge" -- "$cur")); return ;;
    --weight-type|--activation-type) COMPREPLY=($(compgen -W "uint8 int8" -- "$cur")); return ;;
    --fail-on) COMPREPLY=($(compgen -W "error warning note" -- "$cur")); return ;;
    --ignore) COMPREPLY=($(compgen -W "scale-invalid zero-point-range per-axis asymmetric target representation bias-scale bias-overflow saturation annotation no-quantization" -- "$cur")); return ;;
    --out-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --passes|--opset|-j|--jobs) return ;;
    --report|--node-data) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  local flags
  case "$sub" in
    "") COMPREPLY=($(compgen -W "convert verify inspect targets passes help --help --version" -- "$cur")); return ;;
    help) COMPREPLY=($(compgen -W "convert verify inspect targets passes" -- "$cur")); return ;;
    convert) flags="--format --target --out-dir -j --jobs --report --node-data --passes --dump --time-passes --raise-weight-scale
                    --approximate --contrib --weight-type --activation-type --no-saturation-check --opset --annotate
                    --inline-data --fsync --require-change -q --quiet -v --verbose --help" ;;
    verify) flags="--json --symmetric --target --fail-on --werror --ignore --report --node-data -q --quiet --help" ;;
    inspect) flags="--json --format --target --help" ;;
    *) flags="--help" ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -X '!*.onnx' -- "$cur") $(compgen -d -- "$cur"))
  fi
}
complete -o filenames -F _qconv qconv
