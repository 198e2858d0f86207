"""What is shown of a round the core decided: the headless lines (text), the HTML report, each
command's tables, every output format in one registry (export), the receipt's field reference, and replay."""
