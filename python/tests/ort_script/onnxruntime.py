# `import onnxruntime` gives grove, so that classify.py runs as it was written for ONNX Runtime.
import sys

import grove

sys.modules[__name__] = grove
