# flexslurm — the two set-up commands are `make demo` and `make test` (README.md).
GO  ?= go
BIN := bin/flexslurm

.PHONY: build release demo local test vet staticcheck fmt fuzz bench bench-report clean

# FUZZTIME is an execution count ("2000x"), not a duration: with a duration
# the fuzzing coordinator's deadline can race a worker still running an
# input and fail the target with "context deadline exceeded", which a
# loaded machine makes likely (https://go.dev/issue/75804); a count has no
# deadline and only runs slower there. FUZZPARALLEL bounds the workers
# (-parallel, GOMAXPROCS) so that they do not starve one another.
FUZZTIME ?= 2000x
FUZZPARALLEL ?= 1
# SLURM is the local cluster's Slurm release for `make demo` and `make local`:
# 22.05 (this host's) or 24.11 (the chroot `.ci/slurm-chroot.sh build` makes).
SLURM ?= 22.05
# Seeds the chaos benchmark of `make bench` runs.
CHAOSBENCH ?= 200
# staticcheck, pinned: 2026.2.2 supports Go 1.26.
STATICCHECK_VERSION ?= v0.8.2

build:
	$(GO) build -o $(BIN) ./cmd/flexslurm

# Static release binaries (no cgo: no libc needed, so they run on any Linux
# node image) for every RELEASE_ARCHES, with the version, commit and build
# date `flexslurm version` prints, and their SHA256SUMS, in RELEASE_DIR.
# deploy/README.md ("Releases") says where they go.
RELEASE_DIR    ?= bin/release
RELEASE_ARCHES ?= amd64 arm64
VERSION        := $(or $(VERSION),$(shell git describe --tags --always --dirty 2>/dev/null || echo unknown))
COMMIT         := $(or $(COMMIT),$(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$c || echo $$c-dirty; } || echo unknown))
BUILD_DATE     := $(or $(BUILD_DATE),$(shell date -u +%Y-%m-%dT%H:%M:%SZ))
RELEASE_LDFLAGS = -s -w -X github.com/flexslurm/flexslurm/shared/version.Version=$(VERSION) \
  -X github.com/flexslurm/flexslurm/shared/version.Commit=$(COMMIT) \
  -X github.com/flexslurm/flexslurm/shared/version.Date=$(BUILD_DATE)

release:
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	$(foreach a,$(RELEASE_ARCHES),CGO_ENABLED=0 GOOS=linux GOARCH=$(a) $(GO) build -trimpath -ldflags '$(RELEASE_LDFLAGS)' -o $(RELEASE_DIR)/flexslurm-linux-$(a) ./cmd/flexslurm &&) true
	cd $(RELEASE_DIR) && sha256sum flexslurm-linux-* > SHA256SUMS
	@cat $(RELEASE_DIR)/SHA256SUMS

# The whole node lifecycle README.md describes, on this machine, checked; exits non-zero if any
# outcome differs.
demo: build
	$(BIN) local --demo --slurm $(SLURM)

# The local system, left running for your own jobs (Ctrl-C stops everything).
local: build
	$(BIN) local --slurm $(SLURM)

# Every test, with the Firestore and Pub/Sub emulators started around them
# (tests that need a missing prerequisite skip loudly).
test: build vet
	$(BIN) emulators run --optional -- $(GO) test -count=1 -timeout 30m ./...

vet:
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; $(GO) mod tidy -diff; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# Lints with staticcheck at the pinned version (fetched from the module
# proxy by go run, not added to go.mod).
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Every fuzz target (go test -fuzz), FUZZTIME each, one worker; their seed
# corpora also run in `make test`.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== fuzz $$pkg $$f ($(FUZZTIME))"; \
	    GOMAXPROCS=$(FUZZPARALLEL) $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -parallel $(FUZZPARALLEL); \
	  done; \
	done

# Every benchmark the project has, in one run, and BENCHMARKS.md written
# from that run's outputs (dev/benchreport/run.sh; each part's output in
# BENCHDIR): reaction time on the real local path (flexslurm bench react:
# real Slurm, needs root as make demo; REACT_EVENTS one at a time, then a
# burst of REACT_BURST jobs), expiry (seeds 1-10, 7 days and 1 day), the GPU
# trace replay (TRACE, skipped when absent), shared/hooks' ResumeProgram
# benchmark, chaos (CHAOSBENCH seeds), dev/bench (cost per event, burst,
# reconcile at scale) and the other packages' Go benchmarks. Takes most of
# an hour on 2 cores (BENCHMARKS.md gives the recorded run's time).
# bench-report rewrites BENCHMARKS.md from BENCHDIR without running again.
BENCHDIR ?= bin/bench
TRACE ?= ../shared/traces/alibaba-openb-2023-default.csv
REACT_EVENTS ?= 50
REACT_BURST ?= 200
bench: build
	GO=$(GO) BIN=$(BIN) BENCHDIR=$(BENCHDIR) CHAOSBENCH=$(CHAOSBENCH) TRACE=$(TRACE) REACT_EVENTS=$(REACT_EVENTS) REACT_BURST=$(REACT_BURST) \
	  sh dev/benchreport/run.sh

bench-report:
	$(GO) run ./dev/benchreport -dir $(BENCHDIR) -trace-readme $(dir $(TRACE))README.md > BENCHMARKS.md.new && mv BENCHMARKS.md.new BENCHMARKS.md

clean:
	rm -rf bin
