"""The judge and the host: a submission's tests decided where its code cannot reach.

Two processes per submission, both in the job's sandbox. The JUDGE is pytest with the
pristine lab tests, the pristine ``picourse`` runtime and ``plugin.py``; the student's
modules are not imported there but replaced by proxies built from the pristine stubs
(``stubs.py``), whose calls run in the HOST (``host.py``), the only process that imports
the student's code. Only plain data crosses between them (``wire.py``). Tests that must
look inside the student's process run afterwards in the host, checked by canaries
(``needs_host.py``, ``hosted.py``).

This package is copied next to the judge as ``grader_judge``: its modules import only
each other and the standard library, pytest and (in the judge) the pristine ``picourse``.
"""
