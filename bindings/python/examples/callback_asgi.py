"""The same endpoint as an ASGI application: uvicorn --app-dir examples callback_asgi:application.
The library's calls and the logic (callback_wsgi.logic) run on a worker thread, off the event loop."""
from callback_wsgi import endpoint, logic, slotpartner

application = slotpartner.asgi.application(endpoint, logic)
