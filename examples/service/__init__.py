"""The embedding recipe of docs/embedding.md as a runnable HTTP service (issue 38 item 6).

``python -m examples.service --server granian|waitress|uvicorn --store events.db --keys keys.json``;
the application is :mod:`examples.service.app`.
"""
