"""The kit's PopRT worker: one long-lived process per IPU session.

PopRT only supports Python 3.8 (Poplar SDK / graphcorecn/poprt image), so this folder runs apart
from the kit, under that interpreter. Its modules must stay Python-3.8 compatible (tests check them
with vermin and `ast.parse(feature_version=(3, 8))`), import only the standard library, numpy, onnx,
poprt, the SDK's gcipuinfo and each other (relatively), and never the kit; their names are their
own (the kit has a PowerSampler and an InsufficientMemory; the worker a SensorLog and a
StepWontFit).

    python3 <this folder> --serve        requests on stdin, replies on stdout (framed, see wire.py)

Each request is a dict with "op"; each reply is {"ok": True, "result": ...} or {"ok": False,
"error": "Type: message", "traceback": ...}. Ops:
    probe     versions and the device: PopRT's ipu_hardware_version() and get_num_devices()
    load      check the hardware, convert + compile (PopEF cached on disk by model and options),
              then create the Runner once: the IPU is attached and the PopEF loaded here
    run       execute once on the given inputs and return the outputs
    measure   warm-up, then the timed calls of every client thread on the one Runner, with the
              power sensors read over exactly those calls (warm-up stays outside the window)
    close     release the Runner and exit
"""
