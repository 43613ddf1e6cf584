"""The asyncio edge: exactly one run loop, the attempt runner, contexts and pools."""
