# Sourced by the benchmark scripts: make_shape_model EXE CONFIG.json OUT ROOT writes a freshly
# initialised model of the shape CONFIG.json describes into OUT (seed 1), with the demo's tokenizer
# (4,288 tokens: valid ids of any larger vocabulary) when the shape has none.
make_shape_model() {
  local exe="$1" config="$2" out="$3" root="$4"
  "$exe" init-model --config "$config" --out "$out" --seed 1 >/dev/null
  [ -f "$out/tokenizer.json" ] ||
    cp "$root/resources/demo/model/tokenizer.json" "$root/resources/demo/model/tokenizer_config.json" "$out/"
}
