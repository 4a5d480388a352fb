"""Export: images onto disc-sized volumes, their verification, and loading them back."""
