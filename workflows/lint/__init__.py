"""An offline `argo lint`: Argo v4.1.2's validation rules, then the API server's schema constraints."""
