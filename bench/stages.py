"""Where a fold's time goes: the per-event cost of each stage, on one thread.

The fold's own stages, run one after the other as :func:`merge.fold` runs them (with the
collector paused, as it does), each timed on its own: admission (§5: decode, screen),
checks 1–11 (§4 schema, content hash), verification (check 12, bare), checks 12–16 with the
verdicts cached, classification and assembly (§7, §9), and ``state_sha256``. CPU time of
this process is used (``time.process_time``), so a busy machine disturbs it less than wall
time; the figures are per distinct event.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import msgspec

from merge import KeySet
from merge.admission import Admitted, Rejection, admit, admit_batch
from merge.batch import gc_paused
from merge.chains import Node, classify, supersessions
from merge.checks import Candidate, ValidEvent, judge_events, postcheck, precheck
from merge.native import native_module
from merge.native.fold import _handover, key_table
from merge.reasons import Reason
from merge.signatures import SignatureVerifier, verify_signature
from merge.state import assemble_state, decode_state_unchecked, with_state_sha256

from .bound import signature_jobs, verify_compiled, verify_serial
from .measure import Result, best_times
from .measure import best_cpu_time as cpu
from .workload import Workload

__all__ = ["bench_native_stages", "bench_stages"]


def bench_stages(workload: Workload, *, repeat: int) -> list[Result]:
    """Per-event CPU cost of each stage of a fold of ``workload``'s first subject."""
    history = workload.histories[0]
    keys = KeySet.parse(workload.keys)
    subject = history.subject
    timings: dict[str, float] = {}
    with gc_paused():

        def admit_all() -> dict[str, list[Admitted]]:
            copies: dict[str, list[Admitted]] = defaultdict(list)
            for index, item in enumerate(history.inputs):
                outcome = admit(item, index)
                if not isinstance(outcome, Rejection):
                    copies[outcome.event_id].append(outcome)
            return copies

        timings["admission (decode, screen)"], copies = cpu(admit_all, repeat)
        firsts = [event_copies[0] for event_copies in copies.values()]
        timings["checks 1-11 (schema, content hash)"], checked = cpu(
            lambda: [precheck(copy, subject, keys) for copy in firsts], repeat
        )
        candidates = [result for result in checked if isinstance(result, Candidate)]
        jobs = [job for result in candidates if (job := result.signature_job) is not None]
        timings["check 12: verification (bare)"], _ = cpu(
            lambda: [verify_signature(*j) for j in jobs], repeat
        )
        verifier = SignatureVerifier(1)
        verifier.prefetch(jobs)
        timings["checks 12-16, verdicts cached"], judged = cpu(
            lambda: [postcheck(candidate, keys, verifier) for candidate in candidates], repeat
        )
        verdicts: dict[str, Reason | ValidEvent] = {}
        for event_id, result in zip(copies, checked, strict=True):
            verdicts[event_id] = result if isinstance(result, Reason) else Reason.BAD_SIGNATURE
        for verdict in judged:
            if isinstance(verdict, ValidEvent):
                verdicts[verdict.event_id] = verdict
        valid = {eid: v for eid, v in verdicts.items() if isinstance(v, ValidEvent)}

        def classify_and_assemble() -> Any:
            nodes = {eid: Node.of(v) for eid, v in valid.items()}
            classification = classify(nodes, verdicts)
            removed = supersessions(classification.applied, valid)
            return assemble_state(subject, verdicts, valid, classification, removed)

        timings["classify + assemble (§7, §9)"], state = cpu(classify_and_assemble, repeat)
        unhashed = msgspec.structs.replace(state, state_sha256="")
        timings["state_sha256"], _ = cpu(lambda: with_state_sha256(unhashed), repeat)
    events = len(copies)
    verify = timings["check 12: verification (bare)"]
    stages = {f"stage: {name}": seconds for name, seconds in timings.items()}
    return _per_event(stages, verify, events, "stage", verification="stage: check 12: verification (bare)")


def _per_event(
    timings: dict[str, float], verify: float, events: int, prefix: str, verification: str | None = None
) -> list[Result]:
    """Each stage's CPU time per event, beside the bound's verifications (``verify`` seconds of
    libsodium), and the single-thread ceiling against that bound that everything but the fold's
    own verifications (the stage named ``verification``) leaves."""
    overhead = sum(seconds for name, seconds in timings.items() if name != verification)
    own = timings[verification] if verification else verify
    results = [
        Result(name, seconds / events * 1e6, "µs/event", f"{seconds / verify:.0%} of a verification")
        for name, seconds in timings.items()
    ]
    results.append(
        Result(
            f"{prefix}: everything but verification",
            overhead / events * 1e6,
            "µs/event",
            f"single-thread ceiling of fold / bound: {verify / (own + overhead):.2f}",
        )
    )
    return results


def bench_native_stages(workload: Workload, *, repeat: int) -> list[Result]:
    """Per-event CPU cost of each stage of a fold on the compiled path (merge.native), one thread.

    The compiled judge (admission, §4, checks 1–16 with verification), less the bare
    verifications it makes (by its own verifier), gives what the compiled path costs besides
    verifying; then what the
    pure path does with the inputs left to it, ``finish`` (§5 merging, §7, §9, ``state_sha256``)
    and decoding the state's bytes into Structs.
    """
    native = native_module()
    if native is None:
        return [Result("native stages", 0, "", "not built (no cargo): the pure path alone serves")]
    history = workload.histories[0]
    keys = KeySet.parse(workload.keys)
    subject, inputs = history.subject, history.inputs
    table = key_table(keys)
    jobs = signature_jobs(inputs, workload.keys)
    timings: dict[str, float] = {}
    with gc_paused():
        # The judge's cost besides verifying is a difference of two times: they are measured in
        # turn, at least 3 rounds each, so that a moment's load does not fall on one of them
        # alone (one round each, one after the other, once gave a negative difference).
        bare = "native: verification (bare, its own verifier)"
        best_cpu: dict[str, float] = {}
        best_times(
            {
                "libsodium": lambda: verify_serial(jobs),
                bare: lambda: verify_compiled(jobs),
                "judge": lambda: native.judge(inputs, subject, table, 1),
            },
            max(repeat, 3),
            cpu=best_cpu,
        )
        verify, timings[bare] = best_cpu["libsodium"], best_cpu[bare]
        timings["native: admission, checks 1-16 (besides verification)"] = best_cpu["judge"] - best_cpu[bare]
        _, left = native.judge(inputs, subject, table, 1)

        def pure_part() -> Any:
            _, copies = admit_batch((index, inputs[index]) for index in left)
            return judge_events(copies, subject, keys, SignatureVerifier(1))

        timings[f"native: the pure path on the {len(left)} inputs left to it"], verdicts = cpu(
            pure_part, repeat
        )
        invalid = [(event_id, str(v)) for event_id, v in verdicts.items() if isinstance(v, Reason)]
        valid = [_handover(v) for v in verdicts.values() if isinstance(v, ValidEvent)]

        def finish() -> Any:
            # finish() consumes its judgement: judge again outside the timed part for each run.
            # CPU time counts the hashing thread too (process time is every thread's).
            finished = judgements.pop().finish(invalid, valid)
            finished.digest.result()
            return finished.state, finished.superseded

        judgements = [native.judge(inputs, subject, table, 1)[0] for _ in range(repeat)]
        timings["native: finish (§5 merging, §7, §9, state_sha256)"], (state_json, _) = cpu(finish, repeat)
        timings["native: state bytes decoded into Structs"], _ = cpu(
            lambda: decode_state_unchecked(state_json), repeat
        )
    return _per_event(
        timings,
        verify,
        decode_state_unchecked(state_json).event_count,
        "native",
        verification=bare,
    )
