"""Security: TLS (tls.py); SASL and ACLs come next (the security issue)."""
