"""What is shown of a round the core decided: the headless lines and summary (text), the HTML
report, CSV/JSON exports and their tables, the receipt's field reference, and replay."""
