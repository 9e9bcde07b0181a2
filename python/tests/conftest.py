"""The package under test is the one in the build tree (PYTHONPATH=build/python,
set by ctest); GPUSLICE_BUILD_DIR names the build for the vGPU tests."""
import os
import sys

BUILD = os.path.abspath(os.environ.get("GPUSLICE_BUILD_DIR",
                                       os.path.join(os.path.dirname(__file__), "..", "..", "build")))
if os.path.join(BUILD, "python") not in sys.path:
    sys.path.insert(0, os.path.join(BUILD, "python"))
