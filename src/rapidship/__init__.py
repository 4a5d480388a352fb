"""rapidship: build, gate, push and ship RAPIDS images to air-gapped sites."""

__version__ = "0.1.0"
