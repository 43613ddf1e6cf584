"""The API's routers, one per noun; ``app.ROUTERS`` lists them in order."""
