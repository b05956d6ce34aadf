"""What the machine is: the hardware kinds, one object each with its devices (`kinds`), the exact
Graphcore parts and where a figure was measured (`parts`), NVIDIA GPUs and the CUDA device of this
process (`cuda`), the IPUs present and their board (`ipu`), the CPU set and threads (`cpu`), the
provenance captured with every figure (`environment`) with the kit's commit and every installed
distribution (`source`), what changed since a result was made (`drift`), nominal GPU peaks, what
ONNX Runtime really starts here (`onnxruntime_probe`) and which build `make install` puts in
(`gpu_install`, a stdlib script).

Floor 1 of kit/ (docs/architecture.md): imports only the leaves (kit.errors, kit.paths, kit.atomic,
kit.registry, kit.cache, kit.progress, kit.results); never kit.published (the two are independent).
"""
