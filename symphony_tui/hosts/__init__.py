"""Worker hosts over SSH: the system ``ssh`` client with connection reuse
(:mod:`.ssh`) and remote commands in process groups of their own (:mod:`.remote_group`).
Below agents and workspaces, above config (docs/architecture.md "Layers")."""
