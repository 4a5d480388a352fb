"""The docs' generated parts: the task reference, the README's pipeline picture and variant table,
and the size tables, each written from what it describes (`invoke docs.generate`)."""
