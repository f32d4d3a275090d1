# Common tasks, each a one-liner over standard tools. The release build flags
# live here once: CI, `make build` and the Dockerfile all use them.
GO          ?= go
# What `executor version` and the executor_build_info metric report. The
# Dockerfile passes them as build arguments (its context has no .git).
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_FLAGS := -trimpath -tags timetzdata -ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)"
BIN         ?= bin/executor
# golangci-lint, pinned in its own module so nothing is installed globally;
# `go tool` builds it once into the Go build cache.
LINT        := $(GO) tool -modfile=$(CURDIR)/tools/go.mod golangci-lint

.PHONY: build test lint run demo bench screenshots compose-up compose-config clean

build: ## static release binary (same flags as the Dockerfile)
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -o $(BIN) ./cmd/executor

test: ## the contributor's full check, what CI runs (about 15 min on 2 cores; installs missing Debian packages as root)
	./scripts/test.sh

lint: ## gofmt, vet and golangci-lint (.golangci.yml), each module
	test -z "$$(gofmt -l .)" && $(GO) vet ./... && cd xxljob && $(GO) vet ./...
	$(LINT) run ./... && cd xxljob && $(LINT) run ./...

run: ## serve: register with the admin and run jobs (needs XXL_JOB_ACCESS_TOKEN)
	$(GO) run ./cmd/executor serve

demo: ## try it: the main job end to end (schema, demo orders, one close run)
	./scripts/demo.sh

screenshots: ## docs/images/console-*.png: the console in headless chromium on demo data
	$(GO) test ./cmd/executor -run '^TestConsoleInBrowser$$' -count=1 -console-screenshots $(CURDIR)/docs/images

bench: ## close throughput at the default size (takes minutes)
	$(GO) run ./cmd/bench close

compose-up: ## the whole stack on a Docker machine
	VERSION=$(VERSION) COMMIT=$(COMMIT) docker compose up -d --build

compose-config: ## validate docker-compose.yml, every profile (offline, compose v1)
	export XXL_JOB_ACCESS_TOKEN=ci-token-0123456789 EXECUTOR_API_TOKEN=ci-token-0123456789; \
	for p in "" "--profile demo" "--profile monitoring" "--profile rabbitmq" "--profile demo --profile monitoring --profile rabbitmq"; do \
	  docker-compose -f docker-compose.yml $$p config -q || { echo "docker-compose.yml is invalid with [$$p]" >&2; exit 1; }; \
	done; \
	DELAY_TIMER=rabbitmq docker-compose -f docker-compose.yml --profile rabbitmq config -q || { echo "docker-compose.yml is invalid with DELAY_TIMER=rabbitmq" >&2; exit 1; }

clean:
	rm -rf bin logs
