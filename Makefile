# flexslurm — the two set-up commands are `make demo` and `make test` (README.md).
GO  ?= go
BIN := bin/flexslurm

.PHONY: build demo local test vet fmt fuzz clean

FUZZTIME ?= 10s

build:
	$(GO) build -o $(BIN) ./cmd/flexslurm

# The seed's whole lifecycle on this machine, checked; exits non-zero if any
# outcome differs.
demo: build
	$(BIN) local --demo

# The local system, left running for your own jobs (Ctrl-C stops everything).
local: build
	$(BIN) local

# Every test, with the Firestore and Pub/Sub emulators started around them
# (tests that need a missing prerequisite skip loudly).
test: build vet
	$(BIN) emulators run --optional -- $(GO) test -count=1 ./...

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

fmt:
	gofmt -w $$(git ls-files '*.go')

# Every fuzz target (go test -fuzz), FUZZTIME each; their seed corpora also
# run in `make test`.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); \
	  done; \
	done

clean:
	rm -rf bin
