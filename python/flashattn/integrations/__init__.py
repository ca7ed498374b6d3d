"""flashattn behind other libraries' attention interfaces:
flashattn.integrations.transformers (Hugging Face transformers)."""
