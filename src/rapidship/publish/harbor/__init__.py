"""Harbor: its configuration (harbor/), the REST client, and the reconcile that makes Harbor match."""
