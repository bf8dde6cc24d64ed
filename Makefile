# agentscope-memory: every developer and CI entry point.
#   make serve   start the server on its embedded defaults (sqlite under ./data)
#   make test    lint the contract and the Python code (ruff, mypy), then run every test
#   make bench   run the benchmarks and write bench/results.json

PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
BUF    := $(VENV)/bin/buf
PROTO_DIR := proto
PROTOS := $(wildcard $(PROTO_DIR)/agentscope/memory/v1/*.proto)
GEN_DIR := agentscope_memory/_proto
GEN_STAMP := $(GEN_DIR)/.stamp
INSTALL_STAMP := $(VENV)/.install-stamp
export BUF_CACHE_DIR := $(CURDIR)/.cache/buf

.PHONY: all install gen lint test test-python test-java test-java-1.0.9 serve bench clean

all: gen

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=24"

$(INSTALL_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet -e ".[dev]"
	$(PY) -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['tool']['agentscope-memory']['no-deps'])" \
		| xargs $(PIP) install --quiet --no-deps
	touch $@

install: $(INSTALL_STAMP)

# Generated Python code lives in agentscope_memory/_proto/ and is never committed. protoc
# writes absolute imports rooted at the proto path (`from agentscope.memory.v1 import ...`),
# which would collide with the real `agentscope` package, so they are re-rooted under
# agentscope_memory._proto.
$(GEN_STAMP): $(PROTOS) $(INSTALL_STAMP)
	rm -rf $(GEN_DIR)/agentscope
	$(PY) -m grpc_tools.protoc -I$(PROTO_DIR) --python_out=$(GEN_DIR) --pyi_out=$(GEN_DIR) \
		--grpc_python_out=$(GEN_DIR) $(PROTOS)
	$(PY) -m grpc_tools.protoc -I$(PROTO_DIR) --include_source_info --include_imports \
		--descriptor_set_out=$(GEN_DIR)/agentscope/descriptor_set.binpb $(PROTOS)
	find $(GEN_DIR)/agentscope -type d -exec touch {}/__init__.py \;
	find $(GEN_DIR)/agentscope -name '*.py' -o -name '*.pyi' | xargs sed -i \
		-e 's/^from agentscope\.memory\.v1 import/from agentscope_memory._proto.agentscope.memory.v1 import/' \
		-e 's/^import agentscope\.memory\.v1\./import agentscope_memory._proto.agentscope.memory.v1./'
	touch $@

gen: $(GEN_STAMP)

# The proto contract (buf STANDARD), then the Python code: ruff's rules and mypy's types, both
# configured in pyproject.toml. mypy reads the generated stubs, hence `gen` first.
lint: gen
	cd $(PROTO_DIR) && ../$(BUF) lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint gen test-python test-java

test-python: gen
	$(PY) -m pytest -q

# Java client (clients/java, every module: core, agentscope1, agentscope2): Maven builds the stubs
# from proto/ and the tests start the server from $(VENV), so the Python side must be installed
# and generated first. agentscope1 runs on AgentScope-Java 1.0.12 when ../shared/maven-repo holds
# it (a profile in clients/java/pom.xml), else on 1.0.9; test-java-1.0.9 runs on 1.0.9 anyway.
test-java: gen
	cd clients/java && mvn -B -ntp test

test-java-1.0.9: gen
	cd clients/java && mvn -B -ntp test -Dagentscope.version=1.0.9

serve: gen
	$(VENV)/bin/agentscope-memory serve

bench: gen
	$(PY) -m bench

clean:
	rm -rf $(GEN_DIR)/agentscope $(GEN_STAMP) .cache
