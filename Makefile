# make check is the project's one test command (README, .ci/run).
GO ?= go
PKGS := ./...
# Pure-Go packages that run under the race detector in check.
RACE_PKGS := ./pkg/blob/... ./pkg/queue/... ./pkg/graph ./pkg/bm25 ./pkg/ratelog ./pkg/fusion ./pkg/pack ./pkg/segment ./pkg/query ./pkg/xrepo ./pkg/index ./pkg/embed/... ./pkg/api ./pkg/session/... ./pkg/vector/... ./pkg/dense/... ./pkg/pipeline

.PHONY: check fmt vet test race fuzz apifuzz tidy build bench model

check: fmt vet tidy test race fuzz apifuzz

# The default embedding model (bge-small-en-v1.5-q) and ONNX Runtime into
# .cache/; MODELS="all-minilm-l6-v2-q e5-small-v2-q" fetches others
# (scripts/fetch-model.sh --list).
model:
	./scripts/fetch-model.sh $(MODELS)

build:
	$(GO) build -o bin/codectx ./services/codectx

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

tidy:
	$(GO) mod tidy -diff

test:
	./scripts/test.sh

race:
	./scripts/with-minio.sh $(GO) test -race -count=1 $(RACE_PKGS)

# A short coverage-guided run of the packer's budget invariant (its seed
# corpus and property test already run in test).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzPack$$' -fuzztime 10s -fuzzminimizetime 1s ./pkg/pack/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 5s -fuzzminimizetime 1s ./pkg/webhook/
	$(GO) test -run '^$$' -fuzz '^FuzzLiterals$$' -fuzztime 5s -fuzzminimizetime 1s ./pkg/query/
	$(GO) test -run '^$$' -fuzz '^FuzzLocation$$' -fuzztime 5s -fuzzminimizetime 1s ./pkg/api/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 5s -fuzzminimizetime 1s ./pkg/segment/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 5s -fuzzminimizetime 1s ./pkg/bm25/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEntry$$' -fuzztime 5s -fuzzminimizetime 1s ./pkg/index/

# A bounded schemathesis run against a real `up` on loopback (keys on) from
# its own GET /v1/openapi.json: 5xx, schema violations, wrong statuses fail
# it. Installs schemathesis into .cache on first use.
apifuzz:
	./scripts/schemathesis.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./pkg/...
