"""Stands in for `docker exec -i <container>` in the tests: runs its arguments on the same pipes as
a process that is neither this client's descendant nor in its session (as an exec'd process belongs
to the container, not to the client), and exits with its exit code (128 + N for a signal N, as
docker does). Killing this client, or its whole process tree, does not reach that process."""

import os
import subprocess
import sys


def main(argv: list) -> int:
    read, write = os.pipe()
    if os.fork() == 0:  # leaves at once: the reaper below is reparented, out of this client's tree
        os.setsid()
        if os.fork() == 0:  # the container's side: starts the process and reports how it ended
            os.close(read)
            code = subprocess.Popen(argv).wait()
            os.write(write, str(code).encode())
            os._exit(0)
        os._exit(0)
    os.close(write)
    os.wait()
    data = os.read(read, 32)
    code = int(data) if data else 1
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
