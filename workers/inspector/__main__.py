"""``python -m workers.inspector --memory-bytes N``: answer the api's questions
(core.inspection) from stdin to stdout until stdin closes (the api exited or let go).

Limits: the address space is capped at ``--memory-bytes`` (RLIMIT_AS) for the process's
life; each question may use ``--cpu-seconds`` of CPU (RLIMIT_CPU, raised before each one
from what was used so far: past it the kernel ends the process with SIGXCPU) and the api
kills it past its wall-clock limit. A process that ran out of memory, or grew past half
its limit, answers and exits; the api starts a fresh one.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import traceback
from typing import IO

from core.inspection import Answer, Question, Refusal, read_question, write_message

READY = b"ready\n"


def _limit(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _allow_cpu(seconds: int) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime) + seconds + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY
                                             else min(soft, hard), hard))


def _resident_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def answer(question: Question, blob: bytes | None) -> tuple[Answer, bytes | None]:
    """The answer, and the file that follows it (an export's params) if any."""
    from core.inspection import CheckModel, ExportCheckpoint, InspectUpload
    from workers.inspector.export import export_checkpoint
    from workers.inspector.fit import check_model
    from workers.inspector.schedule import preview_schedule
    from workers.inspector.uploads import inspect_upload

    if isinstance(question, InspectUpload):
        return inspect_upload(question, blob), None
    if isinstance(question, CheckModel):
        return check_model(question), None
    if isinstance(question, ExportCheckpoint):
        return export_checkpoint(question, blob)
    return preview_schedule(question), None


def serve(questions: IO[bytes], answers: IO[bytes], *, memory_bytes: int, cpu_seconds: int
          ) -> int:
    answers.write(READY)
    answers.flush()
    while True:
        received = read_question(questions)
        if received is None:
            return 0
        question, blob = received
        _allow_cpu(cpu_seconds)
        reply_blob = None
        try:
            reply, reply_blob = answer(question, blob)
        except MemoryError:
            field = {"inspect_upload": "symbol", "export_checkpoint": "step"}.get(
                question.kind, "model")
            write_message(answers, Answer(refused=Refusal(
                field=field, too_large=True,
                message=f"inspecting it needed more than the inspector's "
                        f"{memory_bytes // 2**20} MiB of memory")))
            return 1
        except Exception:  # noqa: BLE001 - a bug here must not take the answer with it
            traceback.print_exc()
            reply = Answer()  # neither an answer nor a refusal: the api says it failed
        write_message(answers, reply, reply_blob)
        del blob, reply_blob
        if _resident_bytes() > memory_bytes // 2:
            return 0  # a fresh process next time, rather than one grown large


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.inspector")
    parser.add_argument("--memory-bytes", type=int, required=True)
    parser.add_argument("--cpu-seconds", type=int, required=True)
    args = parser.parse_args(argv)
    # The protocol owns stdout; anything else printed goes to stderr.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _limit(args.memory_bytes)
    import workers.inspector.export  # noqa: F401 - the engine, loaded before saying ready
    import workers.inspector.fit  # noqa: F401
    import workers.inspector.schedule  # noqa: F401
    import workers.inspector.uploads  # noqa: F401

    return serve(sys.stdin.buffer, answers, memory_bytes=args.memory_bytes,
                 cpu_seconds=args.cpu_seconds)


if __name__ == "__main__":
    raise SystemExit(main())
