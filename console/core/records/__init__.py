"""What a round measured and what the gate decided, as typed values that read and write back the
documents they were sealed as: the receipt, the verdict, the rules, parity figures, a matrix's cells."""
