"""Stands in for `docker exec -i <container>` in the tests: runs its arguments as a process of a
session of its own on the same pipes, and waits for it. Killing this client does not reach that
process, as killing a `docker exec` client does not reach the process it started in a container."""

import subprocess
import sys

if __name__ == "__main__":
    sys.exit(subprocess.Popen(sys.argv[1:], start_new_session=True).wait())
