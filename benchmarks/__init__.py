"""anarchon's benchmarks: what a claim costs next to the backend's own operation, and how far one scheduler scales.

Run ``python -m benchmarks`` (``--quick``, ``--backends redis,postgres``); see
``benchmarks/README.md``. They print figures and write a report; they never
pass or fail, and no test times anything.
"""
