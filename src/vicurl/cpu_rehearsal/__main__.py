from vicurl.cpu_rehearsal import main

main()
