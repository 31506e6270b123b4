"""Training runs for the web app: the request, the child process, the event stream."""
