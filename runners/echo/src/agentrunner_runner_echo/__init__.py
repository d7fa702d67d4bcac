"""Echo runner."""
