"""The core's scenarios: whole schedulers on the memory backend, in real time.

They wait on the wall clock (slots are seconds apart), so they live in their
own step of the matrix (``scenarios``), beside the unit tests of
packages/anarchon-core/tests, which keep that directory's run short.
"""
