"""The pure core: config -> plan -> rules -> memory -> flags -> command. No Ray, no network,
no subprocess; it imports nothing from cluster/, runs/ or cli/ (a test checks)."""
