# lulc: the two commands a newcomer needs are `make demo` and `make test`.
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: deps build demo test bench-synth bench-ingest clean

# deps installs the system packages lulc builds against (GDAL for the raster
# I/O package) when run as root, and says what to install otherwise.
deps:
	@./scripts/deps

build: deps
	go build -ldflags "$(LDFLAGS)" -o bin/lulc ./cmd/lulc

# demo runs the main job on the embedded default configs: a tiny synthetic
# scene, its analysis-ready stack, a trained forest with its metrics, the
# predicted class map with quicklook and STAC item, its evaluation, and the
# CPU/golearn/GPU benchmark report.
demo: build
	bin/lulc synth --force --out runs/demo/scene
	bin/lulc ingest --force --catalog runs/demo/scene/catalog.json --out runs/demo/stack
	bin/lulc train --force --stack runs/demo/stack --out runs/demo/train
	bin/lulc predict --force --confidence --model runs/demo/train/model.lulcrf --input runs/demo/stack --out runs/demo/predict
	bin/lulc evaluate --force --prediction runs/demo/predict/31TEJ/class.tif --labels runs/demo/stack/31TEJ/labels.tif --out runs/demo/evaluate
	bin/lulc bench --force --out runs/demo/bench
	@echo
	@echo "demo done:"
	@echo "  report     runs/demo/bench/report.md (report.html, stages.png)"
	@echo "  class map  runs/demo/predict/31TEJ/class.tif, quicklook runs/demo/predict/31TEJ/quicklook.png"
	@echo "  metrics    runs/demo/train/metrics.json (validation), runs/demo/evaluate/metrics.json (the map)"

test: deps
	go test -timeout 30m ./...

# bench-synth times full-tile generation (see docs/benchmarks.md).
bench-synth: build
	/usr/bin/time -v bin/lulc synth --force -c configs/synth-full.yaml --out runs/bench/full-tile

# bench-ingest stacks the full tile made by bench-synth (see docs/benchmarks.md).
bench-ingest: build
	/usr/bin/time -v bin/lulc ingest --force -c configs/ingest-full.yaml --out runs/bench/full-stack

clean:
	rm -rf bin runs
