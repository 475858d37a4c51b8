# make check is the project's one test command (README, .ci/run).
GO ?= go
PKGS := ./...
# Packages that run under the race detector in check (the workflows with
# their Temporal test servers and in-process NATS: about 2 minutes).
RACE_PKGS := ./pkg/blob/... ./pkg/queue/... ./pkg/graph ./pkg/bm25 ./pkg/ratelog ./pkg/fusion ./pkg/pack ./pkg/segment ./pkg/query ./pkg/xrepo ./pkg/index ./pkg/embed/... ./pkg/api ./pkg/session/... ./pkg/vector/... ./pkg/dense/... ./pkg/pipeline ./workflows/...

.PHONY: check fmt vet test race fuzz apifuzz tidy build bench model pyself

check: fmt vet tidy pyself test race fuzz apifuzz

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

# The self-tests of the ranking scripts' feature code (standard library only).
pyself:
	python3 scripts/ident-features.py --selftest
	python3 scripts/scope-features.py --selftest

race:
	./scripts/with-minio.sh $(GO) test -race -count=1 $(RACE_PKGS)

# A short coverage-guided run of each fuzz target (their seed corpora already
# run in test). Budgets are execution counts, not durations: a duration races
# Go 1.26's fuzz coordinator at its deadline and fails with "context deadline
# exceeded" and no crasher (golang/go#75804, fixed in Go 1.27). The counts are
# about 5-10 s of fuzzing each on a 2-core machine; -timeout bounds a slow one.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzPack$$' -fuzztime 30000x -fuzzminimizetime 1s -timeout 3m ./pkg/pack/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 50000x -fuzzminimizetime 1s -timeout 3m ./pkg/webhook/
	$(GO) test -run '^$$' -fuzz '^FuzzLiterals$$' -fuzztime 20000x -fuzzminimizetime 1s -timeout 3m ./pkg/query/
	$(GO) test -run '^$$' -fuzz '^FuzzLocation$$' -fuzztime 5000x -fuzzminimizetime 1s -timeout 3m ./pkg/api/
	$(GO) test -run '^$$' -fuzz '^FuzzMCPTools$$' -fuzztime 5000x -fuzzminimizetime 1s -timeout 3m ./pkg/api/
	$(GO) test -run '^$$' -fuzz '^FuzzWebhookSigned$$' -fuzztime 2000x -fuzzminimizetime 1s -timeout 3m ./pkg/api/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 20000x -fuzzminimizetime 1s -timeout 3m ./pkg/segment/
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime 6000x -fuzzminimizetime 1s -timeout 3m ./pkg/bm25/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEntry$$' -fuzztime 20000x -fuzzminimizetime 1s -timeout 3m ./pkg/index/

# A bounded schemathesis run against a real `up` on loopback (keys on) from
# its own GET /v1/openapi.json: 5xx, schema violations, wrong statuses fail
# it. Installs schemathesis into .cache on first use.
apifuzz:
	./scripts/schemathesis.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./pkg/...
