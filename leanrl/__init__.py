"""The platform's command-line client (``leanrl``), built on the API's published OpenAPI schema."""
