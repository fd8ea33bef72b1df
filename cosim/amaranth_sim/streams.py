"""Stream helpers for Amaranth-simulator testbenches (one place, not copied per test).

``put``/``get`` follow ``amaranth.lib.stream`` rules: a producer raises ``valid``
and holds the payload until the cycle ``ready`` is sampled high; random idle
cycles (producer) and back-pressure (consumer) come from a seeded ``random.Random``.
"""

__all__ = ["put", "get"]


async def put(ctx, stream, payload, rng=None, idle_prob=0.0):
    """Send one beat, optionally after random idle cycles."""
    while rng is not None and rng.random() < idle_prob:
        await ctx.tick()
    target = stream.payload
    if isinstance(payload, int) and hasattr(target, "as_value"):
        target = target.as_value()          # raw bits for a layout-typed payload
    ctx.set(target, payload)
    ctx.set(stream.valid, 1)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def get(ctx, stream, rng=None, stall_prob=0.0):
    """Receive one beat (returns the payload value), with random back-pressure."""
    while True:
        ready = not (rng is not None and rng.random() < stall_prob)
        ctx.set(stream.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if ready and valid:
            ctx.set(stream.ready, 0)
            return payload
