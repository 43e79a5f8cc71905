from ddpgen.cli import main

main(prog_name="ddpgen")
