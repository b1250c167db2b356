"""One module per page: ``layout(ctx, state)`` builds it, ``register(app, ctx)`` adds its callbacks."""
