"""Telling people: notices of stalls and failures (sinks, the outbox, delivery), and the
watch that finds what no call reports (stalled claims, lapsed leases, a drained queue)."""
