"""Numbers in, numbers out: medians and intervals, the confidence sequences the gate stops on, change
points in a series. Nothing here knows what a receipt or a build is."""
