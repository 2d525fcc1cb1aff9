"""Builds the optional C speedups of the data path (``aiorocketmq.protocol._speedups``).

Everything else is configured in ``pyproject.toml``. The extension is optional: where it
cannot be compiled the install goes on and ``aiorocketmq.protocol.record`` uses its Python code.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "aiorocketmq.protocol._speedups",
            ["protocol/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
